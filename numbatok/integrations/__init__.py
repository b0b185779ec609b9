"""Bridges to data frameworks. Each module imports its framework lazily: numbatok never needs them."""
