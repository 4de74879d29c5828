"""The runtime shim: typed collectives with the design's autograd (imports torch).

  mesh       set_mesh and resolution of axis arguments to communicators
  kernels    forward kernel of each primitive on the local tensor
  uneven     exact uneven collectives: one all_to_all_single moving the sum of the splits
  autograd   the one autograd Function: forward kernels, backward from the table
  api        the public functions, validating src/dst and shapes first
  pipeline   sends and receives between pipeline stages (backward: the message back)
  _local     the only use of torch's private simulated-rank API
"""
