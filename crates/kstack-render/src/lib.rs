//! Templates to service config files; the model to typed Kubernetes objects and to a Compose file.
