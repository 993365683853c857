"""AWS security groups: a pure reconcile of declared against described rules, and the boto3 shell."""

