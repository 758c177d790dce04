"""Floor 10, ui: the Textual dashboard. The app (app) feeds frames to the session, builds one
`Shown` per refresh (shown) and hands it to the dashboard screen, which owns the panels
(screens, widgets); its keys (keys) call the actions object (actions). Imports the core and
text; the core never imports this package.
"""

__all__ = [
    "actions",
    "app",
    "chart_data",
    "explain",
    "format",
    "keys",
    "messages",
    "panels",
    "screens",
    "shown",
    "widgets",
]
