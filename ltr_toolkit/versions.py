"""The one place where the pinned OpenSearch and LTR plugin versions live."""

#: OpenSearch core, as ``org.opensearch.distribution.integ-test-zip:opensearch:<v>:zip``.
OPENSEARCH_VERSION = "3.6.0"
#: The LTR plugin, as ``org.opensearch:ltr:<v>:zip`` (OpenSearch version + ".0").
LTR_PLUGIN_VERSION = OPENSEARCH_VERSION + ".0"
#: Minimum Java feature version OpenSearch 3.x runs on.
MIN_JAVA = 21

OPENSEARCH_ARTIFACT = (
    "org.opensearch.distribution.integ-test-zip", "opensearch", OPENSEARCH_VERSION, "zip")
LTR_PLUGIN_ARTIFACT = ("org.opensearch", "ltr", LTR_PLUGIN_VERSION, "zip")
#: The k-NN plugin (knn_vector fields and the knn_score script of the semantic features),
#: on Maven Central. Its zip has no native libraries: the toolkit uses the lucene engine.
KNN_PLUGIN_ARTIFACT = ("org.opensearch.plugin", "opensearch-knn", OPENSEARCH_VERSION + ".0", "zip")
#: Docker image with the same version (it bundles the LTR plugin since 2.19).
DOCKER_IMAGE = f"opensearchproject/opensearch:{OPENSEARCH_VERSION}"
#: The plugin's limit of features per feature set (and so of feature ids in a model).
PLUGIN_MAX_FEATURES = 10_000
