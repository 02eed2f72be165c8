"""The example specs (taxi, penguin, digits), shipped inside the wheel as package data so that
`tfxd init` finds them wherever tfxd is installed; README.md says how their data is obtained."""
