//! The only crate that talks to a Kubernetes API server.
