//! The host inventory service: hosts and labels over REST, synced to Kubernetes nodes.
