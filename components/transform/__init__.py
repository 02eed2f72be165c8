"""tfxd's Transform: the spec's declarative features compiled to a tf.Transform preprocessing_fn."""
