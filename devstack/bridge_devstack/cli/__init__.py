"""The `stack`, `sim` and `demo` commands of `cdc-bridge`, added through its plugin entry-point
group `cdc_bridge.commands` (bridge/cli/__init__.py) when this distribution is installed."""
