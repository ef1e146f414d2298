"""OpenStackClient plugin: thin cliff commands, no logic of their own."""
