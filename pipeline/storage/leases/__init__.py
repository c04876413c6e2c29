"""Leases: one run at a time computes a stage's key, whatever the number of runs sharing a store.

`lease_files` keeps the lease records (a file on a local or shared path, an object in a bucket)
with compare-and-swap semantics; `lease` holds, renews, observes and takes over leases.
"""
