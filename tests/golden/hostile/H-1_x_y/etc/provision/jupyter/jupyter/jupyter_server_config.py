# Managed by provision for H-1_x_y (service jupyter); do not edit.
c = get_config()  # noqa: F821  (provided by Jupyter when it loads this file)

c.ServerApp.ip = '::1'
c.ServerApp.port = 8888
c.ServerApp.port_retries = 0
c.ServerApp.open_browser = False
c.ServerApp.root_dir = '/srv/n/b=o,o:k@s+'
# An idle kernel keeps the GPU memory it took until it stops: shut down after
# 3600 s idle, connected or not (a running cell is never idle).
c.MappingKernelManager.cull_idle_timeout = 3600
c.MappingKernelManager.cull_interval = 300
c.MappingKernelManager.cull_connected = True
c.MappingKernelManager.cull_busy = False
