"""The workshop helpdesk: the product under test (see bot.py)."""
