"""The top floor: the `tfxd` command line and `tfxd init`'s scaffolding."""
