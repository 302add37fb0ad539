"""The WSGI application (gunicorn): prepares the data directory, loads settings, checks the deployment's keys,
warms heavy imports."""

import os

from django.core.wsgi import get_wsgi_application

from attune_site.datadir import prepare_data_dir

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "attune_site.settings")
prepare_data_dir()
application = get_wsgi_application()

from attune_site.schema_state import refuse_to_start_behind  # noqa: E402  (needs the settings loaded above)

# A web worker on a schema behind the code would fail on its first query: it does not boot (gunicorn says so).
refuse_to_start_behind("the web server")

from attune_site.identity import verify_deployment_identity  # noqa: E402  (needs the apps loaded above)

verify_deployment_identity()  # a host whose keys are not the deployment's never serves a request

from attune_site.warmup import warm_up  # noqa: E402  (needs the settings loaded above)

warm_up()  # before the first request, not during it
