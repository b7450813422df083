"""The offline model by frames (``AGENT_PLANNER=frames``; issue 55, beside the phrase book until it
reads people better): :mod:`.reading` reads a message with the language layer, :mod:`.steps`
chooses the tool whose declared words the message affirms and fills its frame — each argument by
its type, from the words, the live system (:mod:`.grounded`, :mod:`.asked_data`) and the
conversation — or asks one precise question; :mod:`.model` is the chat model the graph runs."""
