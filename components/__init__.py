"""Custom TFX components of tfxd: one package per component, component.py (its interface) and
executor.py (its work), in TFX's own style."""
