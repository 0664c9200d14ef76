"""Compositing passes beyond the pipeline's own targets (issue 36): the inventory of what a view
layer asks for and Stylized does not write (``inventory``) and Cryptomatte (``cryptomatte``)."""
