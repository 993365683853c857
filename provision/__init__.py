"""provision: declarative GPU-server fleet, DNS cutovers and tunnels."""
