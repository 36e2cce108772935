"""The SDK: streams over an ``openai`` client, sync and async.

- :mod:`.request`: the options of a stream and the request bodies it sends.
- :mod:`.core`: the pass loop's decisions (sans-I/O), shared by both drivers.
- :mod:`.sync_stream` / :mod:`.async_stream`: the drivers that perform the I/O.
"""
