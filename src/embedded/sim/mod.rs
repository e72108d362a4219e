//! Simulated cluster components.
