#![allow(clippy::unwrap_used, clippy::expect_used)]

//! The one integration-test binary: the real `redlock` against real
//! `redis-server` processes started by [`harness`].

mod burst;
mod docs;
mod doctor;
mod drift;
mod engine;
mod fencing;
mod harness;
mod hostile;
mod network;
mod readme;
mod run;
mod secrets;
mod tls;
