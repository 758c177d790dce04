"""Floor 10, ui: the Textual dashboard. The app (app) feeds frames to the session, builds one
`Shown` per refresh (shown) and hands it to the dashboard screen, which owns the panels
(screens, widgets; the widget of each panel of the panel table and the charts' drawing:
panels), one `FleetShown` (fleet_shown) to the fleet screen and one `RequestsShown`
(requests_shown) to the requests view; the values are built from the session, and no screen
or widget reads it. Its keys (keys) call the actions
object (actions). Imports the core and text; the core never imports this package.
"""

__all__ = [
    "actions",
    "app",
    "chart_data",
    "explain",
    "fleet_shown",
    "format",
    "keys",
    "messages",
    "panels",
    "requests_shown",
    "screens",
    "shown",
    "widgets",
]
