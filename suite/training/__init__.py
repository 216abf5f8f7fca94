"""GraphSAGE training through the feature-loader interface: model, trainer, pipeline, data-parallel training."""
