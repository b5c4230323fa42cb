"""WebShop for opid-rllib: offline built-in shop (catalog.py, search.py, pages.py, reward.py) and a
client for a real WebShop server (client.py), behind one env (env.py, id opid/WebShop-v0)."""
