"""The runtime every protocol runs on: transport, ledger, transcripts, codecs."""
