"""What is sent to the cluster for a query: the first stage (``firststage``), long
queries fitted to the clause budget (``clauses``) and the search bodies with their
rescore (``requests``)."""
