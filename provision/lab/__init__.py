"""The local lab of real hosts: a pure plan (`plan`) and the shell that builds it (`shell`)."""

