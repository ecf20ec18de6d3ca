//! The console's connectors pages from outside (HTTP and the browser).
