FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 LITELLM_LOCAL_MODEL_COST_MAP=True ATTUNE_DATA_DIR=/data
WORKDIR /app
# setup.py and MANIFEST.in copy templates/, static/ and sample_data/ into the installed package.
COPY pyproject.toml setup.py MANIFEST.in README.md ./
COPY attune attune
COPY attunebench attunebench
COPY attune_site attune_site
COPY collection collection
COPY annotation annotation
COPY datasets datasets
COPY scoring scoring
COPY research research
COPY devtools devtools
COPY templates templates
COPY static static
COPY sample_data sample_data
COPY manage.py ./
# Build-time keys only, so collectstatic generates neither the secret key nor the pseudonym key into the
# image's data dir (an empty volume mounted there would be seeded with them); the real keys come from the
# environment or are generated into the volume at run time (ATTUNE_PRODUCTION=1 refuses this secret key).
RUN pip install --no-cache-dir . && \
    ATTUNE_SECRET_KEY=collectstatic-only ATTUNE_PSEUDONYM_KEY=collectstatic-only python manage.py collectstatic --noinput
EXPOSE 8000
# Threaded workers hold many slow streaming replies cheaply (attune_site/serving.py says why); the same
# configuration as `attune serve`. Sizes: ATTUNE_WEB_WORKERS, ATTUNE_WEB_THREADS.
CMD ["gunicorn", "--config", "python:attune_site.gunicorn_conf", "--bind", "0.0.0.0:8000"]
