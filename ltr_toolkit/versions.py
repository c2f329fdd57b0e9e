"""The one place where the pinned engine and LTR plugin versions live."""

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

#: Elasticsearch for the local node: 8.17.0, an 8.x release (what most Elasticsearch users
#: run) that the community LTR plugin (o19s/elasticsearch-learning-to-rank) has a tag for
#: (v1.5.10-es8.17.0; 8.x tags run from 8.15.5 to 8.18.6, 9.x from 9.0.1 to 9.0.8), whose
#: test distribution Maven Central serves, and on which the plugin's REST API was checked
#: live before the toolkit supported it. It has everything the toolkit uses (dense_vector,
#: the knn query, named queries' scores, native LTR from 8.15). It needs Java 17-24: its
#: launcher passes a security-manager flag that Java 25 refuses.
ELASTICSEARCH_VERSION = "8.17.0"
ES_LTR_PLUGIN_VERSION = "1.5.10-es" + ELASTICSEARCH_VERSION
ES_MIN_JAVA, ES_MAX_JAVA = 17, 24
ELASTICSEARCH_ARTIFACT = (
    "org.elasticsearch.distribution.integ-test-zip", "elasticsearch", ELASTICSEARCH_VERSION, "zip")

#: Every version ``ltr cluster start --version`` provisions, per engine: its LTR plugin
#: build (the zip's descriptor names the engine version), the Java feature versions its
#: launcher accepts (min, max or None) and OpenSearch's k-NN plugin on Maven Central (None:
#: not served for that version, so its node has the lexical features only). The pinned
#: versions above stay the default. Which plugin behaviour each has (a tree's missing
#: values, ...) is read from the cluster: ``transport.engine``.
SUPPORTED = {
    "opensearch": {
        # 2.x launches with a security manager: Java 11-24 (the newest such JDK is taken);
        # its k-NN plugin needs lang-painless, which the 2.19.6 test distribution lacks
        "2.19.6": {"plugin": "2.19.6.0", "java": (11, 24), "knn": None},
        OPENSEARCH_VERSION: {"plugin": LTR_PLUGIN_VERSION, "java": (MIN_JAVA, None),
                             "knn": OPENSEARCH_VERSION + ".0"},
        "3.8.0": {"plugin": "3.8.0.0", "java": (MIN_JAVA, None), "knn": None},
    },
    "elasticsearch": {
        ELASTICSEARCH_VERSION: {"plugin": ES_LTR_PLUGIN_VERSION, "java": (ES_MIN_JAVA, ES_MAX_JAVA)},
        "8.18.6": {"plugin": "1.5.10-es8.18.6", "java": (ES_MIN_JAVA, ES_MAX_JAVA)},
        # 9.x runs without a security manager: Java 21 and later
        "9.0.8": {"plugin": "1.5.12-es9.0.8", "java": (21, None)},
    },
}
