package harvestersim

import (
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/controller"
)

// controllerOptions let several simulators live in one process (controller names are global).
var controllerOptions = controller.Options{SkipNameValidation: ptr.To(true), MaxConcurrentReconciles: 4}

func (h *Harvester) setupControllers() error {
	mgr := h.Env.Manager
	c := mgr.GetClient()
	for _, setup := range []func() error{
		func() error { return (&vmReconciler{Client: c}).setup(mgr) },
		func() error { return (&vmiReconciler{Client: c, h: h}).setup(mgr) },
		func() error { return (&pvcReconciler{Client: c}).setup(mgr) },
		func() error { return (&lbReconciler{Client: c, h: h}).setup(mgr) },
		func() error { return (&ipPoolReconciler{Client: c}).setup(mgr) },
		func() error { return (&migrationReconciler{Client: c}).setup(mgr) },
	} {
		if err := setup(); err != nil {
			return err
		}
	}
	return nil
}
