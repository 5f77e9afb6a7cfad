"""Wireless link side: the CSI type, link measurement, the user-space link emulator and tc/netem builders."""
