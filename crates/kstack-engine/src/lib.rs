//! Planner (desired vs observed -> graph of steps) and executor over a Cluster trait; releases and history.
