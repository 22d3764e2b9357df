"""A team's own Python: a custom tool and a ``before_run`` hook, named by import
path in ``examples/tool-team-scripted.json`` (docs/tools.md, "Custom tools")."""
