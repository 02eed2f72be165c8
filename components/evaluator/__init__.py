"""tfxd's Evaluator: TFX's, told apart a baseline that is there from one that is not."""
