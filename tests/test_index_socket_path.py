"""The index holder's socket is reached under any data directory: a path longer than a Unix socket's
(108 bytes) goes through a descriptor of its directory (bot.cli.index_client.reachable_path)."""

from __future__ import annotations

import socket
from pathlib import Path

from bot.cli.index_client import command_socket, reachable_path


def test_a_socket_deep_in_a_long_data_directory_is_bound_and_reached(tmp_path: Path) -> None:
    data_dir = tmp_path / ("a-data-directory-with-a-long-name-" * 4)
    data_dir.mkdir()
    path = command_socket(data_dir)
    assert len(str(path)) > 108
    with reachable_path(path) as where, socket.socket(socket.AF_UNIX) as server:
        server.bind(where)
        server.listen()
        with reachable_path(path) as again, socket.socket(socket.AF_UNIX) as client:
            client.connect(again)
            accepted, _ = server.accept()
            client.sendall(b"hello")
            assert accepted.recv(5) == b"hello"
            accepted.close()
    assert path.exists()  # bound where it was asked, under the long directory
