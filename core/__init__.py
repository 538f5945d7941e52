"""The core: models, the filter language, contracts and the plugin registry."""
