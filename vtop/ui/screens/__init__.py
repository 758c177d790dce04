"""The dashboard's screens: the dashboard itself (dashboard), the fleet table (fleet), the
requests view (requests), and the modal text and confirmation screens (text_screen, confirm).
A screen shows what it is given."""

__all__ = ["confirm", "dashboard", "fleet", "requests", "text_screen"]
