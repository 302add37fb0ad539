FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 LITELLM_LOCAL_MODEL_COST_MAP=True ATTUNE_DATA_DIR=/data
WORKDIR /app
# setup.py and MANIFEST.in copy templates/, static/ and sample_data/ into the installed package.
COPY pyproject.toml setup.py MANIFEST.in README.md ./
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
# A build-time key only, so collectstatic generates no secret key into the image's data dir; the real key
# comes from ATTUNE_SECRET_KEY at run time (ATTUNE_PRODUCTION=1 refuses this one).
RUN pip install --no-cache-dir . && ATTUNE_SECRET_KEY=collectstatic-only python manage.py collectstatic --noinput
EXPOSE 8000
# Threaded workers hold many slow streaming replies cheaply (attune_site/serving.py says why); the same
# configuration as `attune serve`. Sizes: ATTUNE_WEB_WORKERS, ATTUNE_WEB_THREADS.
CMD ["gunicorn", "--config", "python:attune_site.gunicorn_conf", "--bind", "0.0.0.0:8000"]
