"""DNS records: providers behind one interface, the records plan, propagation checks."""

