//! The console's webhooks pages from outside (HTTP and the browser).
