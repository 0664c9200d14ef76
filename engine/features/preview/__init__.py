"""The viewport preview: its per-scene state and commands, Scene playback, follow / hold rules and
the morph override."""


def register():
    from . import properties

    properties.register()


def unregister():
    from . import properties

    properties.unregister()
