"""What every entry point (the CLI, the client, the in-process agent, the
worker) stands on: the connection to Temporal (``connection``), the data
converter (``converter``) and the plugin that installs it on a client
(``client_plugin``; a worker's or a replayer's, ``OmaPlugin``, is
``oma.worker.plugin``), the payload codec and its HTTP server
(``codec``, ``codec_server``), the payload store (``payload_store``),
tracing (``tracing``, ``span_attributes``),
the embedded dev server (``dev_server``), a worker's Worker Deployment Version
(``deployment``), log routing (``logs``), the
approval callbacks (``approval_callbacks``), and two helpers the activities
share with the rest: subprocesses that die whole (``process_group``) and
where a credential may be sent (``credentials``). Over the core alone (and
beside ``oma.records``), under the workflows, the activities and the entry
points."""
