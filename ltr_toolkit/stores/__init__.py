"""What the LTR plugin stores: feature sets (``store``), the parameters their templates
take (``params``), models uploaded and deleted (``model_store``) and the plugin's model
cache (``modelcache``)."""
