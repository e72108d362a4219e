//! Job kinds other than Ray's, each an adapter implementing the job framework's public interface
//! (Kueue's `pkg/controller/jobs/<kind>/`), registered by the wiring from `integrations.frameworks`.

pub mod batch;
pub mod elastic;
pub mod pod;
pub mod tas;
