//! The end-to-end suite, one test binary (one link for every topic): the real `engram` binary
//! started on an ephemeral port with a temporary data directory, keys made by the real
//! `engram keys` command, HTTP from outside. `common` is the harness; each module is a topic.

mod common;

mod answers;
mod auth;
mod backup;
mod clients;
mod connectors;
mod connectors_atlassian;
mod connectors_google;
mod connectors_linear;
mod connectors_notion;
mod connectors_oauth;
mod connectors_push;
mod connectors_slack;
mod console;
mod console_connectors;
mod console_webhooks;
mod databases;
mod errors;
mod faults;
mod fields;
mod graph;
mod ingest;
mod limits;
mod logs;
mod parsing;
mod query;
mod scale_out;
mod smoke;
mod webhooks;
