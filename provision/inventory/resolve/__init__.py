"""The resolver's sections: from the validated document to the model's records, one module
per section (hosts, services, python envs, accounts, AWS, DNS zones), all reporting through
one `Context.fail` (file:line:col of the field). `provision.inventory.build` runs them."""
