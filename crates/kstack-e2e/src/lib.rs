//! End-to-end tests against the real local control plane (needs KSTACK_E2E_KUBECONFIG).
