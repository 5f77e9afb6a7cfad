"""The link, outside the testbed's own emulator: tc/netem shaping of real interfaces (``netem``), the shipped traces
(``traces/``: CSI CSVs and Mahimahi files, and their maker), and the field-to-bench and pcap-fidelity checks (root,
network namespaces)."""
