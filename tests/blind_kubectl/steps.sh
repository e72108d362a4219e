# A kubectl user's session, written without reading the differential suite: each `### name` block runs
# in bash with `kubectl` on PATH, against the embedded server and against the real kube-apiserver.
# Blocks run in order; the exit code, stdout and stderr of each are compared after normalisation.

### crds-apply
quotagate-crds | kubectl apply --server-side --force-conflicts -f - >/dev/null && echo applied

### ns-create
kubectl create namespace blind
# A real cluster's controller manager publishes kube-root-ca.crt into a new namespace soon after;
# wait for it quietly (at most about 5 s; the embedded server has none) so no later block races it.
for _ in $(seq 25); do kubectl -n blind get configmap kube-root-ca.crt >/dev/null 2>&1 && break; sleep 0.2; done

### ns-create-again
kubectl create namespace blind

### ns-get-phase
kubectl get ns blind -o jsonpath='{.status.phase}{"\n"}{.spec.finalizers}{"\n"}{.metadata.labels}'

### ns-bad-name
kubectl create namespace Bad_Name

### cm-create
kubectl -n blind create configmap cm1 --from-literal=a=1 --from-literal=b=2

### cm-get-yaml
kubectl -n blind get configmap cm1 -o yaml

### cm-create-dup
kubectl -n blind create configmap cm1 --from-literal=a=1

### cm-bad-key
kubectl -n blind create configmap cm-bad --from-literal='bad key=1'

### cm-label
kubectl -n blind label configmap cm1 env=dev

### cm-label-no-overwrite
kubectl -n blind label configmap cm1 env=prod

### cm-label-overwrite
kubectl -n blind label configmap cm1 env=prod --overwrite

### cm-label-bad-value
kubectl -n blind label configmap cm1 'tier=has spaces'

### cm-annotate
kubectl -n blind annotate configmap cm1 note=hello

### cm-list-selector
kubectl -n blind get configmaps -l env=prod -o name

### cm-list-selector-notin
kubectl -n blind get configmaps -l 'env notin (prod)' -o name

### cm-list-bad-selector
kubectl -n blind get configmaps -l 'env==='

### cm-field-selector
kubectl -n blind get configmaps --field-selector metadata.name=cm1 -o name

### cm-field-selector-unsupported
kubectl -n blind get configmaps --field-selector data.a=1

### cm-patch-merge
kubectl -n blind patch configmap cm1 --type merge -p '{"data":{"c":"3","b":null}}'

### cm-patch-json-remove-missing
kubectl -n blind patch configmap cm1 --type json -p '[{"op":"remove","path":"/data/zzz"}]'

### cm-patch-json-test-fails
kubectl -n blind patch configmap cm1 --type json -p '[{"op":"test","path":"/data/a","value":"9"},{"op":"replace","path":"/data/a","value":"10"}]'

### cm-patch-json-ok
kubectl -n blind patch configmap cm1 --type json -p '[{"op":"add","path":"/data/d","value":"4"},{"op":"replace","path":"/data/a","value":"11"}]'

### cm-patch-strategic
kubectl -n blind patch configmap cm1 -p '{"metadata":{"labels":{"extra":"yes"}},"data":{"e":"5"}}'

### cm-patch-bad-json
kubectl -n blind patch configmap cm1 --type merge -p '{"data":'

### cm-patch-number-value
kubectl -n blind patch configmap cm1 --type merge -p '{"data":{"n":5}}'

### cm-get-json
kubectl -n blind get configmap cm1 -o json

### cm-get-custom-columns
kubectl -n blind get configmap cm1 -o custom-columns=NAME:.metadata.name,ENV:.metadata.labels.env,A:.data.a

### cm-get-table
kubectl -n blind get configmap cm1

### cm-get-missing
kubectl -n blind get configmap nosuch

### cm-replace-stale
kubectl -n blind get configmap cm1 -o json | sed 's/"resourceVersion": "[0-9]*"/"resourceVersion": "1"/' | kubectl replace -f -

### cm-replace
kubectl -n blind get configmap cm1 -o json | sed 's/"a": "11"/"a": "12"/' | kubectl replace -f - && kubectl -n blind get cm cm1 -o jsonpath='{.data.a}'

### cm-delete-dry-run
kubectl -n blind delete configmap cm1 --dry-run=server && kubectl -n blind get cm cm1 -o name

### ssa-one
kubectl -n blind apply --server-side --field-manager=one -f - <<'EOF'
apiVersion: v1
kind: ConfigMap
metadata:
  name: cm2
data:
  a: x
  b: shared
EOF

### ssa-two-conflict
kubectl -n blind apply --server-side --field-manager=two -f - <<'EOF'
apiVersion: v1
kind: ConfigMap
metadata:
  name: cm2
data:
  a: yy
  c: mine
EOF

### ssa-two-same-value-shared
kubectl -n blind apply --server-side --field-manager=two -f - <<'EOF'
apiVersion: v1
kind: ConfigMap
metadata:
  name: cm2
data:
  b: shared
  c: mine
EOF

### ssa-managed-fields-shared
kubectl -n blind get configmap cm2 -o yaml --show-managed-fields

### ssa-two-force
kubectl -n blind apply --server-side --field-manager=two --force-conflicts -f - <<'EOF'
apiVersion: v1
kind: ConfigMap
metadata:
  name: cm2
data:
  a: yy
  b: shared
  c: mine
EOF

### ssa-managed-fields-after-force
kubectl -n blind get configmap cm2 -o json --show-managed-fields | grep -v '"time"'

### ssa-one-drops-field
kubectl -n blind apply --server-side --field-manager=one -f - <<'EOF'
apiVersion: v1
kind: ConfigMap
metadata:
  name: cm2
data:
  b: shared
EOF
kubectl -n blind get configmap cm2 -o jsonpath='{.data}'

### ssa-update-manager-conflict
kubectl -n blind patch configmap cm2 --type merge -p '{"data":{"c":"patched"}}' --field-manager=patcher && kubectl -n blind apply --server-side --field-manager=two -f - <<'EOF'
apiVersion: v1
kind: ConfigMap
metadata:
  name: cm2
data:
  a: yy
  b: shared
  c: mine
EOF

### ssa-dry-run
kubectl -n blind apply --server-side --field-manager=three --dry-run=server -o yaml -f - <<'EOF'
apiVersion: v1
kind: ConfigMap
metadata:
  name: cm2
data:
  z: dry
EOF

### csa-create
kubectl -n blind apply -f - <<'EOF'
apiVersion: v1
kind: ConfigMap
metadata:
  name: cm3
  labels:
    app: csa
data:
  k: v1
EOF

### csa-unchanged
kubectl -n blind apply -f - <<'EOF'
apiVersion: v1
kind: ConfigMap
metadata:
  name: cm3
  labels:
    app: csa
data:
  k: v1
EOF

### csa-configured
kubectl -n blind apply -f - <<'EOF'
apiVersion: v1
kind: ConfigMap
metadata:
  name: cm3
data:
  k: v2
EOF
kubectl -n blind get configmap cm3 -o jsonpath='{.metadata.labels}{"|"}{.data}{"|"}{.metadata.annotations}'

### csa-to-ssa
kubectl -n blind apply --server-side -f - <<'EOF'
apiVersion: v1
kind: ConfigMap
metadata:
  name: cm3
data:
  k: v3
EOF
kubectl -n blind get configmap cm3 -o yaml --show-managed-fields | grep -E 'manager:|operation:|k:'

### apply-unknown-field
kubectl -n blind apply -f - <<'EOF'
apiVersion: v1
kind: ConfigMap
metadata:
  name: cm4
bogus: 1
data:
  k: v
EOF

### apply-unknown-field-ignore
kubectl -n blind apply --validate=false -f - <<'EOF'
apiVersion: v1
kind: ConfigMap
metadata:
  name: cm4
bogus: 1
data:
  k: v
EOF

### apply-missing-kind
echo '{"apiVersion":"v1","metadata":{"name":"x"}}' | kubectl -n blind apply -f -

### apply-bad-yaml
printf 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: [oops\n' | kubectl -n blind apply -f -

### secret-create
kubectl -n blind create secret generic s1 --from-literal=password=hunter2 && kubectl -n blind get secret s1 -o yaml

### secret-bad-base64
kubectl -n blind apply -f - <<'EOF'
apiVersion: v1
kind: Secret
metadata:
  name: s2
data:
  password: not*base64
EOF

### secret-stringdata
kubectl -n blind apply -f - <<'EOF'
apiVersion: v1
kind: Secret
metadata:
  name: s3
type: Opaque
stringData:
  user: admin
EOF
kubectl -n blind get secret s3 -o jsonpath='{.data}{"|"}{.stringData}'

### secret-type-immutable
kubectl -n blind patch secret s3 --type merge -p '{"type":"kubernetes.io/tls"}'

### secret-table
kubectl -n blind get secrets

### svc-create
kubectl -n blind create service clusterip svc1 --tcp=80:8080 && kubectl -n blind get service svc1 -o yaml

### svc-wide
kubectl -n blind get services -o wide

### svc-bad-type
kubectl -n blind apply -f - <<'EOF'
apiVersion: v1
kind: Service
metadata:
  name: svc-bad
spec:
  type: Bogus
  ports:
  - port: 80
EOF

### svc-bad-port
kubectl -n blind apply -f - <<'EOF'
apiVersion: v1
kind: Service
metadata:
  name: svc-bad
spec:
  ports:
  - port: 700000
    protocol: SCTPX
EOF

### svc-clusterip-immutable
kubectl -n blind patch service svc1 --type merge -p '{"spec":{"clusterIP":"10.0.0.77"}}'

### svc-nodeport
kubectl -n blind create service nodeport svc2 --tcp=81:8081 --dry-run=server -o jsonpath='{.spec.type}{"|"}{.spec.externalTrafficPolicy}{"|"}{.spec.ports[0].protocol}'

### pod-dry-run-defaults
kubectl -n blind run p0 --image=nginx --restart=Never --dry-run=server -o yaml

### pod-create
kubectl -n blind apply -f - <<'EOF'
apiVersion: v1
kind: Pod
metadata:
  name: p1
  labels:
    app: web
spec:
  containers:
  - name: c
    image: nginx:1.25
    resources:
      requests:
        cpu: 100m
EOF

### pod-spec-defaults
kubectl -n blind get pod p1 -o jsonpath='{.spec.restartPolicy}|{.spec.dnsPolicy}|{.spec.schedulerName}|{.spec.terminationGracePeriodSeconds}|{.spec.containers[0].imagePullPolicy}|{.spec.containers[0].terminationMessagePath}|{.spec.serviceAccountName}|{.spec.enableServiceLinks}|{.spec.tolerations}|{.status.qosClass}'

### pod-wide
kubectl -n blind get pods -o wide

### pod-bad-restart
kubectl -n blind apply -f - <<'EOF'
apiVersion: v1
kind: Pod
metadata:
  name: p2
spec:
  restartPolicy: Sometimes
  containers:
  - name: c
    image: nginx
EOF

### pod-no-containers
kubectl -n blind apply -f - <<'EOF'
apiVersion: v1
kind: Pod
metadata:
  name: p3
spec:
  containers: []
EOF

### pod-dup-container
kubectl -n blind apply -f - <<'EOF'
apiVersion: v1
kind: Pod
metadata:
  name: p4
spec:
  containers:
  - name: c
    image: nginx
  - name: c
    image: busybox
EOF

### pod-patch-image
kubectl -n blind patch pod p1 -p '{"spec":{"containers":[{"name":"c","image":"nginx:1.26"}]}}' && kubectl -n blind get pod p1 -o jsonpath='{.spec.containers[0].image}'

### pod-patch-forbidden
kubectl -n blind patch pod p1 --type merge -p '{"spec":{"restartPolicy":"Never"}}'

### pod-label-selector
kubectl -n blind get pods -l app=web -o custom-columns=NAME:.metadata.name,PHASE:.status.phase

### pod-field-selector-phase
kubectl -n blind get pods --field-selector status.phase=Pending -o name

### pod-delete-force
kubectl -n blind delete pod p1 --grace-period=0 --force

### deploy-create
kubectl -n blind create deployment d1 --image=nginx --replicas=2

### deploy-defaults
kubectl -n blind get deployment d1 -o jsonpath='{.spec.strategy}|{.spec.revisionHistoryLimit}|{.spec.progressDeadlineSeconds}|{.spec.template.spec.containers[0].imagePullPolicy}|{.metadata.generation}'

### deploy-bad-selector
kubectl -n blind apply -f - <<'EOF'
apiVersion: apps/v1
kind: Deployment
metadata:
  name: d2
spec:
  selector:
    matchLabels:
      app: one
  template:
    metadata:
      labels:
        app: two
    spec:
      containers:
      - name: c
        image: nginx
EOF

### deploy-set-image
kubectl -n blind set image deployment/d1 nginx=nginx:1.27 && kubectl -n blind get deployment d1 -o jsonpath='{.metadata.generation}|{.spec.template.spec.containers[0].image}'

### job-create
kubectl -n blind create job j1 --image=busybox -- echo hi

### job-defaults
kubectl -n blind get job j1 -o jsonpath='{.spec.backoffLimit}|{.spec.completions}|{.spec.parallelism}|{.spec.completionMode}|{.spec.suspend}|{.spec.template.spec.restartPolicy}|{.spec.podReplacementPolicy}|{.spec.manualSelector}|{.spec.template.metadata.labels.job-name}'

### job-bad-parallelism
kubectl -n blind apply -f - <<'EOF'
apiVersion: batch/v1
kind: Job
metadata:
  name: j2
spec:
  parallelism: -1
  template:
    spec:
      restartPolicy: Always
      containers:
      - name: c
        image: busybox
EOF

### job-template-immutable
kubectl -n blind patch job j1 --type merge -p '{"spec":{"template":{"spec":{"containers":[{"name":"j1","image":"busybox:2"}]}}}}'

### job-delete-foreground
kubectl -n blind delete job j1 --cascade=foreground --wait=false

### sa-create
kubectl -n blind create serviceaccount sa1 && kubectl -n blind get serviceaccount sa1 -o yaml

### sa-token
kubectl -n blind create token sa1 --duration=10m | cut -c1-3

### rbac-role
kubectl -n blind create role r1 --verb=get,list --resource=pods,configmaps && kubectl -n blind get role r1 -o yaml

### rbac-bad-role-resource
kubectl -n blind create role r2 --verb=get --resource=nosuchthing

### rbac-binding
kubectl -n blind create rolebinding rb1 --role=r1 --serviceaccount=blind:sa1 && kubectl -n blind get rolebinding rb1 -o wide

### rbac-can-i-yes
kubectl auth can-i list configmaps -n blind --as=system:serviceaccount:blind:sa1

### rbac-can-i-no
kubectl auth can-i delete configmaps -n blind --as=system:serviceaccount:blind:sa1

### rbac-impersonated-denied
kubectl -n blind delete configmap cm1 --as=system:serviceaccount:blind:sa1

### rbac-roleref-immutable
kubectl -n blind patch rolebinding rb1 --type merge -p '{"roleRef":{"name":"other"}}'

### rbac-clusterrole
kubectl create clusterrole blind-cr --verb=get --resource=nodes && kubectl get clusterrole blind-cr -o jsonpath='{.rules}'

### crd-get
kubectl get crd clusterqueues.kueue.x-k8s.io -o jsonpath='{.spec.names.shortNames}|{.spec.scope}|{.status.acceptedNames.kind}|{.status.conditions[?(@.type=="Established")].status}'

### api-resources-kueue
kubectl api-resources --api-group=kueue.x-k8s.io

### api-resources-namespaced-core
kubectl api-resources --namespaced=true --api-group='' -o name

### explain-cq
kubectl explain clusterqueue.spec.resourceGroups.flavors --api-version=kueue.x-k8s.io/v1beta2

### explain-pod-restart
kubectl explain pod.spec.restartPolicy

### cq-create
kubectl apply -f - <<'EOF'
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata:
  name: default-flavor
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata:
  name: cq1
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: ["cpu", "memory"]
    flavors:
    - name: default-flavor
      resources:
      - name: cpu
        nominalQuota: 9
      - name: memory
        nominalQuota: 36Gi
EOF

### cq-get
kubectl get clusterqueues -o wide

### cq-get-yaml
kubectl get cq cq1 -o yaml

### cq-unknown-field
kubectl apply -f - <<'EOF'
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata:
  name: cq2
spec:
  bogusField: true
  namespaceSelector: {}
EOF

### cq-wrong-type
kubectl apply -f - <<'EOF'
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata:
  name: cq3
spec:
  namespaceSelector: "everything"
EOF

### lq-create
kubectl -n blind apply -f - <<'EOF'
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata:
  name: lq1
spec:
  clusterQueue: cq1
EOF
kubectl -n blind get localqueues

### lq-ssa-conflict
kubectl -n blind apply --server-side --field-manager=a -f - <<'EOF'
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata:
  name: lq2
spec:
  clusterQueue: cq1
EOF
kubectl -n blind apply --server-side --field-manager=b -f - <<'EOF'
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata:
  name: lq2
spec:
  clusterQueue: cq-other
EOF

### wl-finalizer-delete
kubectl -n blind apply -f - <<'EOF'
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata:
  name: lq3
  finalizers: ["example.com/hold"]
spec:
  clusterQueue: cq1
EOF
kubectl -n blind delete localqueue lq3 --wait=false
kubectl -n blind get localqueue lq3 -o jsonpath='{.metadata.finalizers}|{.metadata.deletionGracePeriodSeconds}|{.metadata.deletionTimestamp}'

### wl-finalizer-release
kubectl -n blind patch localqueue lq3 --type json -p '[{"op":"remove","path":"/metadata/finalizers"}]' && kubectl -n blind get localqueue lq3

### rc-create
kubectl -n blind apply -f - <<'EOF'
apiVersion: ray.io/v1
kind: RayCluster
metadata:
  name: rc1
spec:
  rayVersion: "2.9.0"
  headGroupSpec:
    rayStartParams: {}
    template:
      spec:
        containers:
        - name: ray-head
          image: rayproject/ray:2.9.0
EOF

### rc-get
kubectl -n blind get rayclusters

### rc-status-patch-via-main
kubectl -n blind patch raycluster rc1 --type merge -p '{"status":{"state":"ready"}}' && kubectl -n blind get raycluster rc1 -o jsonpath='{.status}'

### rc-delete
kubectl -n blind delete raycluster rc1

### raw-api
kubectl get --raw /api

### raw-apis-batch
kubectl get --raw /apis/batch/v1

### raw-apis-kueue
kubectl get --raw /apis/kueue.x-k8s.io

### raw-health
kubectl get --raw /readyz; echo; kubectl get --raw /livez; echo; kubectl get --raw /healthz

### raw-version-minor
kubectl get --raw /version | grep -o '"minor":"[0-9]*"'

### raw-not-found
kubectl get --raw /apis/nosuch.group/v1

### raw-cm-list-limit
kubectl get --raw '/api/v1/namespaces/blind/configmaps?labelSelector=env%3Dprod'

### get-unknown-kind
kubectl get widgetz

### get-ns-missing
kubectl get pods -n nosuchns

### delete-missing
kubectl -n blind delete configmap nosuch

### delete-ignore-not-found
kubectl -n blind delete configmap nosuch --ignore-not-found

### cm-list-final
kubectl -n blind get configmaps -o name

### ns-delete-empty
kubectl create namespace blind-tmp >/dev/null && kubectl delete namespace blind-tmp && kubectl get namespace blind-tmp
