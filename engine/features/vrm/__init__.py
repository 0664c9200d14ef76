"""VRM: reading with or without the VRM Add-on, the VRM 1.0 expression rules, expressions and binds,
MToon from the add-on's material."""
